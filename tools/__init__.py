"""Developer tools outside the runtime package: model conversion (``python -m tools.models``), task data (``suite data``),
the data generators (``make_tasks.py``, ``make_calibration.py``, ``make_longtext.py``), ``lm_eval_phases.py``,
``pack_run.py``, ``gen_recipe_reference.py`` (docs/02-recipe-reference.md) and ``h200/`` (the GPU-session harness)."""
