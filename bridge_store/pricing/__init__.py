"""Prices: what a run's tokens cost, computed when read and never stored.

``table`` is the price table (per model, prices per million tokens, each entry in
force from a UTC day), the monthly budgets per tenant and the version that priced a
page; ``money`` the exact integers costs are kept in and how they are written;
``loader`` reads the table's TOML file, every mistake one line; ``book`` holds the
table a server prices with and reads the file again on SIGHUP; ``template`` writes
the file ``bridge-store prices init`` starts a team with.
"""
