"""Every platform fact the stack relies on, each in one place with its source, in one module per section:
platform, gcp, privilege, pods, job, gpu_health, changes, fabric. Callers import the section they mean.

Sources are tagged as in ../shared/reference/gcp-infrastructure.md and jobs-and-frameworks.md:
CT = GoogleCloudPlatform/cluster-toolkit @1047080, CEA = container-engine-accelerators @992db81,
KES = kubernetes-engine-samples @2b50365, DOC-AIH = the AI Hypercomputer GKE docs,
DOC-LUS = the Managed Lustre docs, NRL = NVIDIA-NeMo/RL tags, VERL = verl-project/verl.
"""
