"""RQ entry point (thin): the work lives in alerts.delivery."""

from alerts import delivery


def deliver_webhook(delivery_pk: int) -> str:
    return delivery.attempt(delivery_pk)


def drain_webhooks() -> str:
    return f"{delivery.drain()} attempted"
