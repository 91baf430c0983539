"""The roles: planner, retriever, coder, verifier and echo, each a module (the verifier a package)."""
