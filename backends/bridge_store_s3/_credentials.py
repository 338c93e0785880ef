"""Credentials of a named AWS profile, for object_store, which reads no ~/.aws files.

object_store finds credentials in ``AWS_*`` variables, web identity tokens, ECS and
EC2 instance metadata on its own. A profile (``profile=`` in the URL or
``AWS_PROFILE``: static keys, SSO, assume-role, credential_process in ``~/.aws/config``
and ``credentials``) is resolved by botocore, the AWS SDK's own implementation of that
chain, imported only when a profile is asked for.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from bridge_store.errors import ConfigurationError

if TYPE_CHECKING:
    from obstore.store import S3Credential

#: How long object_store may reuse refreshable credentials before asking again;
#: botocore refreshes them itself well before they expire.
_REASK_AFTER = timedelta(minutes=5)


class ProfileCredentials:
    """An obstore credential provider backed by botocore's chain for one profile."""

    def __init__(self, profile: str) -> None:
        try:
            import botocore.exceptions
            import botocore.session
        except ImportError:
            raise ConfigurationError(
                f"AWS profile {profile!r} needs botocore: pip install 'bridge-store[s3]'"
            ) from None
        try:
            session = botocore.session.Session(profile=profile)
            self.region: str | None = session.get_config_variable("region")
            credentials: Any = session.get_credentials()
        except botocore.exceptions.BotoCoreError as error:
            raise ConfigurationError(f"AWS profile {profile!r}: {error}") from None
        if credentials is None:
            raise ConfigurationError(f"AWS profile {profile!r} has no credentials")
        self._credentials = credentials
        self._refreshable = hasattr(credentials, "refresh_needed")

    def __call__(self) -> S3Credential:
        frozen = self._credentials.get_frozen_credentials()
        expires_at = datetime.now(UTC) + _REASK_AFTER if self._refreshable else None
        return {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            "token": frozen.token,
            "expires_at": expires_at,
        }
