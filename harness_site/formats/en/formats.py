"""One date format on every page, the admin included: ISO order, 24 h clock, the zone said (TIME_ZONE)."""

DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s T"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
FIRST_DAY_OF_WEEK = 1
