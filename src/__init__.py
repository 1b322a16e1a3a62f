"""GRPO experiments: Hydra configs, Lightning training, MLflow records."""

from src.utils.resolvers import register_resolvers

register_resolvers()
