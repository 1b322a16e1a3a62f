"""Models trained before GRPO and cached: the masked-LM generator and its judge."""
