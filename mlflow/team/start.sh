#!/bin/sh
# Container entrypoint: the auth config is written at start from the environment (.env), so no file in
# the repository or the image holds a password.
set -eu
db="postgresql://${POSTGRES_USER}:${POSTGRES_PASSWORD}@postgres:5432/mlflow"
cat > /tmp/basic_auth.ini <<INI
[mlflow]
default_permission = READ
database_uri = ${db}
admin_username = admin
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
INI
export MLFLOW_AUTH_CONFIG_PATH=/tmp/basic_auth.ini
exec mlflow server --host 0.0.0.0 --port 5000 --app-name basic-auth \
  --backend-store-uri "$db" --artifacts-destination s3://mlflow --serve-artifacts
