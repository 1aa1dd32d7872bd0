# Stands for the checkout's own core package: benchkit must never import it.
raise ImportError("the checkout's core package was imported")
