"""Which servers an Apprise service connects to, read from Apprise's own parsed plugin object (never from
the URL text): the servers a user named, none for a service at a fixed public address, or None when
hubwatch cannot tell (refused unless the operator allows the service by name).

Three kinds, reviewed against Apprise 2.3 (a plugin this module does not know is undetermined, so an
Apprise upgrade fails closed):

- Services whose URL names the server (every template has a `{host}`): the plugin's `host` and `port`,
  except where a mode sends to the vendor instead (ntfy://topic to ntfy.sh, matrix:// in t2bot mode)
  or where the service keeps the server elsewhere (mailto:// connects to its `smtp_host`).
- Services that keep the server in another field: Zulip (`organization` and `hostname`), Azure
  Communication Services (`endpoint`).
- Services whose `{host}` is not a server: the sender's mail domain of Mailgun, SparkPost, SendPulse and
  SMTP2Go, WeChat's corporate id; they post to their vendor's API.
- FIXED: cloud services whose plugin connects only to its vendor's hosts, or to hosts under the vendor's
  domain picked from a region field Apprise validates against its own list or pattern.

Undetermined (None): desktop and local services (dbus://, gnome://, macosx://, windows://, syslog://,
blink1://), services that follow addresses found at run time or read local files (nostr:// relays,
bluesky:// DID documents, vapid:// subscription files, fcm:// key files, deltachat:// with its own IMAP
and SMTP servers), and the services whose server is optional in their URL (betterstack://, fluxer://,
lametric://, notica://, notifico://, pushdeer://, trigv://): their host field can hold a token.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Server = tuple[str, int]  # host name or address (no brackets), port

# Vendor-hosted services (reviewed: no field of the URL picks the server they connect to).
FIXED = frozenset({
    "Notify46Elks", "NotifyAWSWhatsApp", "NotifyAfricasTalking", "NotifyAprs", "NotifyBale", "NotifyBrevo",
    "NotifyBulkSMS", "NotifyBulkVS", "NotifyBurstSMS", "NotifyCM", "NotifyChanify", "NotifyClickSend",
    "NotifyClickatell", "NotifyCliq", "NotifyD7Networks", "NotifyDapnet", "NotifyDingTalk", "NotifyDiscord",
    "NotifyDot", "NotifyEight00com", "NotifyExotel", "NotifyFeishu", "NotifyFireHydrant", "NotifyFlock",
    "NotifyFreeMobile", "NotifyGitHub", "NotifyGoogleChat", "NotifyGroundmail", "NotifyGroupMe", "NotifyGuilded",
    "NotifyGupshup", "NotifyHttpSMS", "NotifyIFTTT", "NotifyILert", "NotifyIncidentIO", "NotifyInstagram",
    "NotifyJira", "NotifyJoin", "NotifyKakaoTalk", "NotifyKaleyra", "NotifyKavenegar", "NotifyKook",
    "NotifyKumulos", "NotifyLFGAlarm", "NotifyLark", "NotifyLauther", "NotifyLine", "NotifyMSG91",
    "NotifyMailerSend", "NotifyMessageBird", "NotifyMobileMessage", "NotifyNotifiarr", "NotifyNotifyApp",
    "NotifyNotifyre", "NotifyOctopush", "NotifyOffice365", "NotifyOneSignal", "NotifyOpsgenie", "NotifyPagerDuty",
    "NotifyPagerTree", "NotifyPingram", "NotifyPlivo", "NotifyPostmark", "NotifyProwl", "NotifyPushBullet",
    "NotifyPushMe", "NotifyPushSafer", "NotifyPushWard", "NotifyPushed", "NotifyPushover", "NotifyPushplus",
    "NotifyPushy", "NotifyQQ", "NotifyReddit", "NotifyResend", "NotifyRevolt", "NotifyRingCentral", "NotifyRyver",
    "NotifySES", "NotifySFR", "NotifySIGNL4", "NotifySMSC", "NotifySMSManager", "NotifySMSTunnel", "NotifySNS",
    "NotifySendGrid", "NotifyServerChan", "NotifySerwerSMS", "NotifySeven", "NotifySignalgrid", "NotifySimplePush",
    "NotifySinch", "NotifySlack", "NotifySpike", "NotifySplunk", "NotifySpugpush", "NotifySquadcast",
    "NotifyStackfield", "NotifyStreamlabs", "NotifyTechulusPush", "NotifyTelegram", "NotifyTelesign",
    "NotifyTelnyx", "NotifyThreema", "NotifyTwilio", "NotifyTwist", "NotifyTwitter", "NotifyViber", "NotifyVoipms",
    "NotifyVonage", "NotifyWPush", "NotifyWeComBot", "NotifyWebexTeams", "NotifyWhapi", "NotifyWhatsApp",
    "NotifyWxPusher", "NotifyYouLMK", "NotifyZalo", "NotifyZoom",
})

# Services that name a server but connect to others too, or whose host field may be a token.
UNDETERMINED = frozenset({
    "NotifyDeltaChat", "NotifyBetterStack", "NotifyFluxer", "NotifyLametric", "NotifyNotica", "NotifyNotifico",
    "NotifyPushDeer", "NotifyTrigv",
})


def _default_port(plugin: Any) -> int:
    port = getattr(plugin, "port", None)
    if isinstance(port, int) and port:
        return port
    return 443 if getattr(plugin, "secure", False) else 80


def _host(plugin: Any) -> tuple[Server, ...]:
    host = str(getattr(plugin, "host", None) or "").strip("[]")
    return ((host, _default_port(plugin)),) if host else ()


def _email(plugin: Any) -> tuple[Server, ...]:
    host = str(getattr(plugin, "smtp_host", None) or getattr(plugin, "host", None) or "").strip("[]")
    return ((host, _default_port(plugin)),) if host else ()


def _ntfy(plugin: Any) -> tuple[Server, ...]:
    return () if str(getattr(plugin, "mode", "")) == "cloud" else _host(plugin)  # cloud: ntfy.sh


def _matrix(plugin: Any) -> tuple[Server, ...]:
    return () if str(getattr(plugin, "mode", "")) == "t2bot" else _host(plugin)  # t2bot: webhooks.t2bot.io


def _vendor(plugin: Any) -> tuple[Server, ...]:
    return ()  # the URL's host field is an account's mail domain or id; the plugin posts to its vendor's API


def _zulip(plugin: Any) -> tuple[Server, ...]:
    return ((f"{plugin.organization}.{plugin.hostname}", 443),)  # https://{org}.{hostname}/api/v1/messages


def _acs(plugin: Any) -> tuple[Server, ...]:
    return ((str(plugin.endpoint), 443),)  # https://{endpoint}/emails:send


_SPECIAL: dict[str, Callable[[Any], tuple[Server, ...]]] = {
    "NotifyEmail": _email,
    "NotifyNtfy": _ntfy,
    "NotifyMatrix": _matrix,
    "NotifyZulip": _zulip,
    "NotifyACS": _acs,
    # {host} is the sender's mail domain (Mailgun, SparkPost, SendPulse, SMTP2Go) or a corporate id (WeChat)
    **dict.fromkeys(("NotifyMailgun", "NotifySparkPost", "NotifySendPulse", "NotifySMTP2Go", "NotifyWeChat"), _vendor),
}


def names_host(plugin_class: type) -> bool:
    """Every URL form of the service names its server (`{host}` in each of its templates)."""
    templates = getattr(plugin_class, "templates", ()) or ()
    return bool(templates) and all("{host}" in t for t in templates)


def servers(plugin: Any) -> tuple[Server, ...] | None:
    """The servers a user named that the plugin will connect to: () for a service at its vendor's fixed
    hosts, None when hubwatch cannot tell."""
    name = type(plugin).__name__
    if name in _SPECIAL:
        return _SPECIAL[name](plugin)
    if name in FIXED:
        return ()
    if name in UNDETERMINED or not names_host(type(plugin)):
        return None
    found = _host(plugin)
    return found or None
