"""GRPO experiments: Hydra configs, Lightning training, MLflow records."""

from src.pretraining.folders import register_stage_resolver
from src.utils.resolvers import register_resolvers

register_resolvers()
register_stage_resolver()  # ${stage:NAME}: a stage's model folder, named before it trains
