"""Scoring trained heads (base model, SFT adapter, GRPO adapter) on held-out rows."""
