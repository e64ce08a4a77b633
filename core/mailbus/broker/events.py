"""The broker's trace event kinds under their short names (TraceEvent.name is the
module the event concerns); defined, with their documentation, in BrokerKind."""

from mailbus.broker.kinds import BrokerKind

PUBLISHED = BrokerKind.PUBLISHED
DELIVERED = BrokerKind.DELIVERED
DROPPED = BrokerKind.DROPPED
REFUSED = BrokerKind.REFUSED
MODULE_FAILED = BrokerKind.MODULE_FAILED
MODULE_ADDED = BrokerKind.MODULE_ADDED
MODULE_STARTED = BrokerKind.MODULE_STARTED
MODULE_REMOVED = BrokerKind.MODULE_REMOVED
LINK_ADDED = BrokerKind.LINK_ADDED
LINK_REMOVED = BrokerKind.LINK_REMOVED
DESTROYED = BrokerKind.DESTROYED
