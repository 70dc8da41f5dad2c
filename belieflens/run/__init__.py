"""Running a study: queries to forward rows, the radix tree, batches, windows, resume, shards.

- :mod:`.extract`: environment → queries → tokens → forward → cache file, window by window;
- :mod:`.rows`, :mod:`.trie`, :mod:`.trie_runner`, :mod:`.runner`, :mod:`.budget`: what each
  read-out costs and how the rows are batched over their shared prefixes;
- :mod:`.resume`: the windows left to run;
- :mod:`.generate`, :mod:`.generation_log`: generated replies, recorded and replayed;
- :mod:`.generate_batch`, :mod:`.gen_prefix`, :mod:`.coroutines`, :mod:`.batched`:
  generations decoded together (a conversation's next turn from its last one's cache),
  across episodes driven step by step;
- :mod:`.cluster`, :mod:`.shards`: the same run sharded over a Dask cluster.
"""
