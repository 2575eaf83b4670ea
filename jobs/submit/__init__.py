"""The Ray client side: reaching the dashboard from a kubeconfig, a local head, the post-deploy step's provider, the stack as the client reaches it."""
