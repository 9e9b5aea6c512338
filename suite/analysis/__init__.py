"""From stage results to judgements: the summary's metrics, paired statistics, the gate, run comparison, Pareto fronts."""
