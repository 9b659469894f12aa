"""Visibility-timeout queues (seed 000, SQS): the contract, backends opened from URLs,
the queue workload's processing strategies, and what they cost."""

from replicalab.queues.base import (
    DeadLetter,
    Delivery,
    Queue,
    QueueClient,
    QueueError,
    QueueInfo,
    QueueUnavailable,
    StaleReceipt,
)

__all__ = ["DeadLetter", "Delivery", "Queue", "QueueClient", "QueueError", "QueueInfo",
           "QueueUnavailable", "StaleReceipt"]
