"""Who is calling and what they may see: bearer and named tokens, the tokens file,
encryption at rest (sealing of sdkMetadata and blobs, key rotation) and the audit log.
"""
