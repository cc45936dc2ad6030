"""Django projects that tests/test_django.py runs with each Django flavour."""
