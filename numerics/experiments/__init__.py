"""Stage 8: experiments over many checkpoints and the paper's claims (the sweep, C1-C9)."""

__all__: list[str] = []
