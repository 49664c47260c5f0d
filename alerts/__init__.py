"""Outgoing webhooks: the Host tells other systems (chat, paging, automation) when work needs people or ended."""
