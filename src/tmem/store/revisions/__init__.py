"""Alembic revisions of the store schema (:mod:`tmem.store.schema`), applied by :mod:`tmem.store.upgrade`."""
