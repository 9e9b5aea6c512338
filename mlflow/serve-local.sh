#!/usr/bin/env bash
# A tracking server on 127.0.0.1 for machines without Docker: SQLite store and artifacts under
# mlflow/data (or $SUITE_MLFLOW_DIR). Point a recipe at it with tracking.uri: http://127.0.0.1:5000
#   bash mlflow/serve-local.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
port=${1:-5000}
dir=${SUITE_MLFLOW_DIR:-mlflow/data}
mkdir -p "$dir/artifacts"
exec .venv/bin/mlflow server --host 127.0.0.1 --port "$port" \
  --backend-store-uri "sqlite:///$(realpath "$dir")/mlflow.db" \
  --artifacts-destination "$(realpath "$dir")/artifacts"
