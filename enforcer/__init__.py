"""enforcer: the Kubernetes admission webhook. Reads the decision table the analytics write; never telemetry."""
