"""The revisions, oldest first: 0001 carries the pre-Alembic history, later ones change the schema."""
