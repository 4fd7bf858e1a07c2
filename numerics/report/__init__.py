"""Stage 9: presentation. Tables, JSON documents, figures and report folders, for the command line and notebooks."""

__all__: list[str] = []
