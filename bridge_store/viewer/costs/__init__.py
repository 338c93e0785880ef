"""The overview's money and who spent it: shares priced when shown, by day, model,
agent and creator, against the period before and the tenant's monthly budget.

``figures`` adds runs, failures, tokens and cost up (a cost only for runs whose model
has a price that day; the rest counted as unpriced, with their tokens); ``breakdown``
makes the by-day, by-model, by-agent and by-creator tables of a window and the one
before it; ``budget`` the month's spend, its projection and the budget; ``scan`` sums
the shares by reading the runs, for stores that keep no per-day sums, within a bound.
"""
