"""Settings for Harness Host, read from the environment with safe embedded defaults.

SQLite, a local Redis on port 6390 and the offline demo model need no configuration; ``DATABASE_URL``,
``REDIS_URL``, ``SECRET_KEY``, ``CHECKPOINT_KEY``, ``DEBUG`` and ``ALLOWED_HOSTS`` override them for real deployments.
Every ``HARNESS_*`` environment variable is read here, once, into the setting of the same name
(docs/configuration.md lists them all). A bad value is reported by the ``harness`` system check (runs/checks.py), never
guessed at.
Importing this module writes nothing: ``python -m harness_site.var_dir`` (run by bin/setup, bin/run and bin/test)
prepares the var directory and its secret key.
"""

from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from csp.constants import NONE, SELF

from harness_site import var_dir
from harness_site.environment import Environment

env = Environment()

BASE_DIR = Path(__file__).resolve().parent.parent
HARNESS_VAR_DIR: Path = Path(env.text("HARNESS_VAR_DIR", str(BASE_DIR / "var")))

HARNESS_ENV = env.choice("HARNESS_ENV", "local", ("local", "production"))
PRODUCTION: bool = HARNESS_ENV == "production"
"""The one switch for a deployment: HTTPS only (Secure cookies, HSTS, SSL redirect), a SECRET_KEY from the
environment, no debug mode, no demo operator; see docs/deploy.md "Production mode"."""


def _secret_key() -> str:
    """SECRET_KEY when given; in local mode otherwise the key `python -m harness_site.var_dir` generated."""
    if key := env.text("SECRET_KEY", ""):
        return key
    if PRODUCTION:
        env.problems.append("HARNESS_ENV=production needs SECRET_KEY in the environment (50+ random characters).")
        return ""
    key_file = HARNESS_VAR_DIR / var_dir.SECRET_KEY_FILE
    if not key_file.exists():
        env.problems.append(f"No secret key: set SECRET_KEY, or run bin/setup, which writes one to {key_file}.")
        return ""
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
# The key of the checkpoints' HMAC digests, so an edit of the database cannot forge a state to continue from.
# By default the secret key (salted for this use); changing either makes every stored checkpoint refuse to load.
CHECKPOINT_KEY = env.text("CHECKPOINT_KEY", "") or SECRET_KEY
# The key of run bundles' signatures (an HMAC over the manifest): two Hosts that share it accept each other's bundles.
HARNESS_BUNDLE_KEY = env.text("HARNESS_BUNDLE_KEY", "") or SECRET_KEY
DEBUG = env.flag("DEBUG")
if PRODUCTION and DEBUG:
    env.problems.append("HARNESS_ENV=production refuses DEBUG: it shows settings and code to anyone.")
ALLOWED_HOSTS = env.items("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env.items("CSRF_TRUSTED_ORIGINS", "")
# How this Host names itself in the bundles it exports ("imported from <host>" on the importing Host).
HARNESS_HOST_NAME = env.text("HARNESS_HOST_NAME", "") or (ALLOWED_HOSTS[0] if ALLOWED_HOSTS else "harness-host")
# The largest bundle file accepted, and the most its members may hold once decompressed.
HARNESS_BUNDLE_MAX_BYTES = env.integer("HARNESS_BUNDLE_MAX_BYTES", 256 * 1024 * 1024)
HARNESS_BUNDLE_MAX_UNPACKED_BYTES = env.integer("HARNESS_BUNDLE_MAX_UNPACKED_BYTES", 2 * 1024 * 1024 * 1024)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_rq",
    "axes",
    "runs",
    "observers",
    "agui_api",
    "alerts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a lockout raised during authentication into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Every page's scripts and styles are files (data for scripts travels in json_script blocks or data attributes):
# nothing inline runs, in either mode.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [NONE],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        "base-uri": [NONE],
        "object-src": [NONE],
    }
}

# `1` behind a proxy that terminates TLS and sets X-Forwarded-For and X-Forwarded-Proto: a connection from one of
# the proxy's addresses is then taken to come from the client the proxy names (harness_site/proxied_clients.py).
HARNESS_BEHIND_TLS_PROXY = env.flag("HARNESS_BEHIND_TLS_PROXY")
HARNESS_TRUSTED_PROXIES = env.items("HARNESS_TRUSTED_PROXIES", "127.0.0.1,::1")
if PRODUCTION:
    SECURE_SSL_REDIRECT = True
    # The supervisor's and load balancer's health probe may speak plain HTTP on the private side.
    SECURE_REDIRECT_EXEMPT = [r"^health/$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = 365 * 24 * 3600
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    if HARNESS_BEHIND_TLS_PROXY:
        # Only behind a proxy that sets this header itself: otherwise a client could claim HTTPS.
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

ROOT_URLCONF = "harness_site.urls"
ASGI_APPLICATION = "harness_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "harness_site.health.worker_status",
                "runs.context_processors.pending_approvals",
                "runs.context_processors.queue_state",
                "runs.context_processors.saved_views_nav",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env.text("DATABASE_URL", f"sqlite:///{HARNESS_VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=env.integer("DATABASE_CONN_MAX_AGE", 0),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Owner-only database files (harness_site/private_sqlite).
    DATABASES["default"]["ENGINE"] = "harness_site.private_sqlite"
    # Several processes (web, worker, sweeper) share the file: wait for locks instead of failing,
    # and use WAL so readers never block the worker's journal writes.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Tests that talk to subprocesses (daphne, rq worker) need a file they can open too.
    DATABASES["default"]["TEST"] = {"NAME": str(HARNESS_VAR_DIR / "test_db.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Django's four: applied wherever a password is set through a form or command (admin, changepassword,
# createsuperuser); the local demo operator's published password is set past them on purpose (runs/demo_operator.py).
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

AUTHENTICATION_BACKENDS = [
    # django-axes counts failed logins and refuses a locked-out username from the same address.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    # Team roles as permissions on their team's objects (`user.has_perm(perm, obj)`); it authenticates nobody.
    "runs.services.store.role_permissions.TeamRoleBackend",
]
HARNESS_LOGIN_FAILURE_LIMIT = env.integer("HARNESS_LOGIN_FAILURE_LIMIT", 5)
HARNESS_LOGIN_LOCKOUT_MINUTES = env.integer("HARNESS_LOGIN_LOCKOUT_MINUTES", 15)
AXES_FAILURE_LIMIT = HARNESS_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=HARNESS_LOGIN_LOCKOUT_MINUTES)
# Per username and address: an attacker cannot lock an operator out from elsewhere, nor try many names at once
# without each one counting.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_USERNAME_CALLABLE = "harness_site.login_throttling.throttled_username"
# The connection's address, which harness_site/proxied_clients.py sets from the trusted proxy's header: never a
# header read here, which any client could forge.
AXES_CLIENT_IP_CALLABLE = "harness_site.login_throttling.client_address"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:threads"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
FORMAT_MODULE_PATH = ["harness_site.formats"]
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = HARNESS_VAR_DIR / var_dir.STATIC_ROOT
# Finder-based serving keeps `bin/run` free of a collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

REDIS_URL = env.text("REDIS_URL", "redis://127.0.0.1:6390/0")


def channel_layer_config(redis_url: str) -> dict[str, Any]:
    """channels-redis' pub/sub layer: a group message is one Redis PUBLISH, which each web process receives once
    and hands to its own consumers in the group, instead of one Redis list entry per consumer popped one by one.
    Groups live in the web process, and redis-py subscribes again when its connection comes back, so a restarted
    Redis does not make sockets deaf. Pub/sub delivers at most once: consumers heal lost messages from the
    database (`observers/consumers.py`)."""
    return {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [{"address": redis_url}]},
    }


CHANNEL_LAYERS = {"default": channel_layer_config(REDIS_URL)}
# Logging out closes that session's sockets at once; this re-check also ends those of expired sessions.
HARNESS_SOCKET_SESSION_CHECK_SECONDS = env.number("HARNESS_SOCKET_SESSION_CHECK_SECONDS", 60.0)
# Every socket joins its groups again and catches up (a timeline socket through its execution's feed, once per web
# process) this often, so a message lost on the way (pub/sub delivers at most once; a Redis restart drops what is
# in flight) stalls a page for at most this long.
HARNESS_SOCKET_REFRESH_SECONDS = env.number("HARNESS_SOCKET_REFRESH_SECONDS", 10.0)
# The most executions one bulk action (approve, deny, cancel from the executions list) may act on.
HARNESS_BULK_MAX_ITEMS = env.integer("HARNESS_BULK_MAX_ITEMS", 1000)

# Jobs travel as JSON, never pickles, and only the Host's own decode (runs/services/store/queued_jobs.py): the
# Host's code and its worker use these whatever the settings say; here they are for django-rq's own commands.
RQ_QUEUES: dict[str, dict[str, Any]] = {
    "default": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 3600, "SERIALIZER": "rq.serializers.JSONSerializer"},
}
# The Host's worker runs many jobs at once on one event loop (see runs/worker/); django-rq keeps its
# default on_db_commit mode, so jobs are enqueued only once the rows they read are committed.
RQ = {"WORKER_CLASS": "runs.worker.HostWorker", "JOB_CLASS": "runs.services.store.queued_jobs.HostJob"}

# /health/ calls the sweeper stale when no sweeper finished a pass for this long (it sweeps every 2 s), and
# the queue a backlog above this many waiting jobs.
HARNESS_HEALTH_SWEEPER_STALE_SECONDS = env.number("HARNESS_HEALTH_SWEEPER_STALE_SECONDS", 30.0)
HARNESS_HEALTH_QUEUE_LIMIT = env.integer("HARNESS_HEALTH_QUEUE_LIMIT", 1000)
# How long after a run died the sweeper starts its recovery run; doubled with every further attempt, at most 60 s.
HARNESS_RECOVERY_BACKOFF_SECONDS = env.number("HARNESS_RECOVERY_BACKOFF_SECONDS", 1.0)
# Retention (runs/services/recovery/retention.py): rows deleted per transaction, how often the sweeper runs a pass,
# and how many chunks one of its passes deletes before it goes back to recovery (the next pass goes on).
HARNESS_RETENTION_CHUNK_SIZE = env.integer("HARNESS_RETENTION_CHUNK_SIZE", 500)
HARNESS_RETENTION_INTERVAL_SECONDS = env.number("HARNESS_RETENTION_INTERVAL_SECONDS", 300.0)
HARNESS_RETENTION_CHUNKS_PER_PASS = env.integer("HARNESS_RETENTION_CHUNKS_PER_PASS", 200)
# The worker (runs/worker/): how many runs one process drives at once on its event loop, and how long a stopping
# worker lets them go on before it gives up their leases to the sweeper (below supervisord's stopwaitsecs).
HARNESS_RUNS_PER_WORKER = env.integer("HARNESS_RUNS_PER_WORKER", 50)
HARNESS_WORKER_GRACE_SECONDS = env.number("HARNESS_WORKER_GRACE_SECONDS", 15.0)

# Plug-ins, as dotted paths resolved with import_string (docs/models-and-tools.md): the tool sets whose tools
# agent profiles may enable, comma-separated, each a pydantic-ai FunctionToolset or a function returning one;
# and the model a profile whose model is "demo" runs, a function returning a pydantic-ai Model. The offline
# demo agent is the default of both.
HARNESS_TOOLSETS = env.items("HARNESS_TOOLSETS", "runs.harness.demo.toolset")
HARNESS_DEMO_MODEL = env.text("HARNESS_DEMO_MODEL", "runs.harness.demo.demo_model")
# Hosts an agent profile's base URL may reach over plain http besides this machine (comma-separated names or
# addresses, e.g. a model server on the private network); any other base URL must be https.
HARNESS_MODEL_HOSTS_ALLOWED = [host.lower() for host in env.items("HARNESS_MODEL_HOSTS_ALLOWED", "")]

# The largest RunAgentInput the AG-UI endpoint reads; a larger body gets 413.
AGUI_MAX_BODY_BYTES = env.integer("AGUI_MAX_BODY_BYTES", 1024 * 1024)
# How long a new API token authenticates unless its issuer chooses otherwise (admin, `manage.py harness_token`).
HARNESS_API_TOKEN_DAYS = env.integer("HARNESS_API_TOKEN_DAYS", 90)
# Executions one user, and one API token, may start per minute (pages and AG-UI; 0: no limit), counted in Django's
# cache: runs/services/store/start_limits.py.
HARNESS_STARTS_PER_MINUTE = env.integer("HARNESS_STARTS_PER_MINUTE", 30)
HARNESS_TOKEN_STARTS_PER_MINUTE = env.integer("HARNESS_TOKEN_STARTS_PER_MINUTE", 30)

# Ports and process counts of `bin/run` (deploy/supervisord.conf reads them); declared here so the check
# refuses a bad one before anything starts.
HARNESS_PORT = env.integer("HARNESS_PORT", 8765)
REDIS_PORT = env.integer("REDIS_PORT", 6390)
HARNESS_WORKERS = env.integer("HARNESS_WORKERS", 1)
HARNESS_WEB = env.integer("HARNESS_WEB", 1)

# Outgoing webhooks (docs/alerts.md): the address pages are reached at, for links in the payloads; how long one
# delivery attempt may take; how many attempts a delivery gets, the first retry's delay (doubled for each further
# one, at most an hour); and how long before an approval expires `approval.expiring` is sent.
HARNESS_PUBLIC_URL = env.text("HARNESS_PUBLIC_URL", f"http://127.0.0.1:{HARNESS_PORT}").rstrip("/")
HARNESS_WEBHOOK_TIMEOUT_SECONDS = env.number("HARNESS_WEBHOOK_TIMEOUT_SECONDS", 10.0)
HARNESS_WEBHOOK_ATTEMPTS = env.integer("HARNESS_WEBHOOK_ATTEMPTS", 5)
HARNESS_WEBHOOK_BACKOFF_SECONDS = env.number("HARNESS_WEBHOOK_BACKOFF_SECONDS", 30.0)
HARNESS_WEBHOOK_EXPIRING_MINUTES = env.integer("HARNESS_WEBHOOK_EXPIRING_MINUTES", 10)

# OpenTelemetry (runs/services/worker/telemetry.py): runs' model requests and tool calls as spans, masked, sent over
# OTLP to where the standard `OTEL_EXPORTER_OTLP_*` variables say (read by the exporter itself).
HARNESS_OTEL_ENABLED = env.flag("HARNESS_OTEL_ENABLED")

HARNESS_LOG_LEVEL = env.choice("HARNESS_LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "harness_site": {"handlers": ["console"], "level": HARNESS_LOG_LEVEL},
        "runs": {"handlers": ["console"], "level": HARNESS_LOG_LEVEL},
        "observers": {"handlers": ["console"], "level": HARNESS_LOG_LEVEL},
        "alerts": {"handlers": ["console"], "level": HARNESS_LOG_LEVEL},
    },
}

# Read by the runs.E001 check (runs/checks.py); every variable read above is in `HARNESS_ENVIRONMENT_NAMES`.
HARNESS_ENVIRONMENT_PROBLEMS = tuple(env.problems)
HARNESS_ENVIRONMENT_NAMES = tuple(env.names)
