"""Stage 7: does a complexity measure track generalization? Measures and rank statistics over trained models."""

__all__: list[str] = []
