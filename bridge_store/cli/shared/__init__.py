"""What the commands share, apart from the commands themselves (tests/test_layout.py
checks that no command imports another): the store, tenant and key-file options
(:mod:`.store_options`), reading history (:mod:`.read_options`), moving it
(:mod:`.transfer`), serve's options (:mod:`.serve_options`, which ``config show``
takes too) and config file (:mod:`.settings`), TLS (:mod:`.tls`), price tables
(:mod:`.price_options`), running under uvicorn (:mod:`.serving`) and what they print
(:mod:`.wording`).
"""
