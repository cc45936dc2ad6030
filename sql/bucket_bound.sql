-- The bucket a statement of one bucket reads: its bound parameter.
%(bucket)s
