"""`task=char_diffusion`: a masked character model aligned by GRPO against a frozen judge
(docs/recipes/char_diffusion.md)."""
