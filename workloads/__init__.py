"""What runs in the cluster: GKE network objects, the gIB installer, storage, staging, the RayCluster."""
