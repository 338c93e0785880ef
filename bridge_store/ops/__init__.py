"""What operators watch: metrics, logs, traces, readiness and backend availability,
and the metering of calls that feeds them.
"""
