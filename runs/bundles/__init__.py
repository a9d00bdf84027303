"""A run you can take elsewhere: exports of one run and the import of a bundle.

``bundle`` writes a reproducibility bundle (a .tar.gz: the model configuration, the agent, the
prompt version, each task's environment, every attempt with its stages and files, and a
``manifest.json`` of sha256 checksums), ``import_bundle`` reads one back on another
installation (checksums verified, sizes capped, the same leaderboard row), ``swebench``
writes the SWE-bench experiments submission layout, ``scrub`` keeps every key and token out
of both, ``manifest`` holds the archive format, ``actions`` the audited import, and ``cli``
and ``api`` are the doors. It may import the results and the imports, never the pages, the
API of other apps, the pipeline or the workers.
"""
