"""`gpuledger reclaim`: GPUs idle past their class's limit, warned, then given back through the Kubernetes API
(docs/reclaim.md). streaks: how long each job has been idle; plan: what to do about it; kube: the API calls;
run: one pass, reading and writing the lake."""
