"""The ``sharedq`` command."""
