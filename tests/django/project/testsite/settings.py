"""Settings of the test project: its database comes from DB_* variables, and its tasks
run on shardq in that same database."""

import os

import django

SECRET_KEY = "not-a-secret: a test project"
DEBUG = os.environ.get("DJANGO_DEBUG") == "1"
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = ["shardq.contrib.django", "jobs"]
if django.VERSION < (6, 0):  # the Tasks API is the django-tasks backport before Django 6
    INSTALLED_APPS.insert(0, "django_tasks")

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ["DB_NAME"],
        "USER": os.environ.get("DB_USER", ""),
        "PASSWORD": os.environ.get("DB_PASSWORD", ""),
        "HOST": os.environ.get("DB_HOST", ""),
        "PORT": os.environ.get("DB_PORT", ""),
    }
}

TASKS = {
    "default": {
        "BACKEND": "shardq.contrib.django.ShardqBackend",
        "QUEUES": ["default", "reports"],
        "OPTIONS": {
            # No DSN: the queue lives in DATABASES["default"].  A failing task gets a
            # second attempt a tenth of a second later, then it is FAILED.
            "SETTINGS": {"max_attempts": 2, "backoff_base_s": 0.05, "backoff_jitter": 0.0},
            "KEEP_RESULT_S": 600,
        },
    }
}
