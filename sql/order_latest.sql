-- Latest first.
DESC
