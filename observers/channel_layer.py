"""The Channels layer on Redis with a pool that waits for a free connection instead of failing.

channels-redis builds a plain redis-py `ConnectionPool`, which raises `MaxConnectionsError` once 100 connections
are busy: a burst of a few hundred subscriptions (every `group_add`/`group_discard` borrows one) then failed
with an internal error. A `BlockingConnectionPool` makes the extra callers queue for `timeout` seconds.
"""

from __future__ import annotations

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool

__all__ = ("BlockingPoolRedisChannelLayer",)


class BlockingPoolRedisChannelLayer(RedisChannelLayer):
    """Hosts are `{"address": <redis URL>, **pool options}`; `max_connections` and `timeout` size the wait."""

    def create_pool(self, index: int) -> BlockingConnectionPool:
        options = dict(self.hosts[index])
        return BlockingConnectionPool.from_url(options.pop("address"), **options)
