"""What a run leaves for people: the HTML report, the charts it and the frontier page share, MLflow."""
