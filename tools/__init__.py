"""Developer tools outside the runtime package: model conversion (``python -m tools.models``), task data (``suite data``)."""
