"""The code index: walking a tree, chunking files, the LanceDB store and its lock, queries, file ranking, symbols."""
