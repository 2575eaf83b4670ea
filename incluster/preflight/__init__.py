"""Preflight of a run's GPU nodes: measure each GPU, read what nvidia-smi reports, judge the node.

`measure.measure_node()` is what one Ray task per GPU node calls (torch is imported only there);
`smi` builds the nvidia-smi queries and parses their text; `verdict.judge_node()` turns a node's
report into pass/fail per GPU and per node, one readable line per finding. `smi` and `verdict`
are pure and import without torch.

The fabric: `fabric_measure.measure_fabric()` is what every rank of one process group across the GPU nodes runs
(collective sweeps, then pairs of nodes when the group is below the floor); `fabric` holds the bus-bandwidth
formulas, the NCCL log parser and `judge_fabric()`; `fabric_search` plans the pairs and reads their results.
All three import without torch.
"""
