"""The recipe: a YAML file naming a model, its BF16 baseline, FP8 variants, and how to judge them.

``schema`` holds the pydantic models (``extra="forbid"``, strict types), ``throughput`` the serving
section and its SLO, ``load`` reads the YAML and turns every validation error into a Problem that names
the field and its fix, ``checks`` checks what a recipe refers to before any model is loaded. Relative
paths in a recipe are relative to the recipe file's folder.
"""

from suite.runtime.errors import Problem, SuiteError
from suite.runtime.secrets import SECRET_ENV, URL_PASSWORD
from suite.recipe.base import Strict, bad
from suite.recipe.checks import check_references, output_dir_problems, serving_problems
from suite.recipe.evalspec import EvalSpec, TaskSpec
from suite.recipe.gatespec import DEFAULTS, PER_TASK, GateSpec
from suite.recipe.load import load_recipe, load_yaml, read_text, validation_problems
from suite.recipe.checkpoint import is_local_model
from suite.recipe.loaded import LoadedRecipe
from suite.recipe.schema import (SCHEMES, SCHEMES_NEEDING_DATA, CalibrationMix, ModelSpec, QuantizationSpec, Recipe,
                                 RuntimeSpec, TrackingSpec, VariantSpec)
from suite.records.benchmark import SloSpec
from suite.recipe.throughput import ThroughputSpec

__all__ = ["DEFAULTS", "PER_TASK", "SCHEMES", "SCHEMES_NEEDING_DATA", "SECRET_ENV", "URL_PASSWORD", "CalibrationMix",
           "EvalSpec", "GateSpec", "LoadedRecipe", "ModelSpec", "Problem", "QuantizationSpec", "Recipe", "RuntimeSpec",
           "SloSpec", "Strict", "SuiteError", "TaskSpec", "ThroughputSpec", "TrackingSpec", "VariantSpec", "bad",
           "check_references", "is_local_model", "load_recipe", "load_yaml", "output_dir_problems", "read_text",
           "serving_problems", "validation_problems"]
