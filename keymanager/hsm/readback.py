"""Every object the service makes is read back: the HSM must have honoured its template.

A token may ignore an attribute it was given (openCryptoki 3.8 leaves an unwrapped key
non-sensitive whatever the template says). So after every generate, unwrap and copy, the
adapter reads back ``CKA_TOKEN``, ``CKA_PRIVATE``, ``CKA_SENSITIVE``, ``CKA_EXTRACTABLE``, the
capability flags and the key length, and :func:`check_object` destroys an object that differs
and raises :class:`TemplateNotHonoured` naming the attribute (503 ``hsm_unavailable``: the HSM's
configuration, not the caller, is at fault; the request's audit record says it failed).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from pkcs11 import Attribute
from pkcs11 import exceptions as p11

from keymanager.errors import HsmUnavailable

log = logging.getLogger(__name__)

CHECKED = (
    Attribute.TOKEN,
    Attribute.PRIVATE,
    Attribute.SENSITIVE,
    Attribute.EXTRACTABLE,
    Attribute.ALWAYS_SENSITIVE,
    Attribute.NEVER_EXTRACTABLE,
    Attribute.ENCRYPT,
    Attribute.DECRYPT,
    Attribute.SIGN,
    Attribute.VERIFY,
    Attribute.WRAP,
    Attribute.UNWRAP,
    Attribute.DERIVE,
)
"""The boolean attributes read back whenever the template sets them."""


class TemplateNotHonoured(HsmUnavailable):
    """The HSM made an object other than the template asked for (the object is destroyed)."""

    def __init__(self, attribute: str) -> None:
        super().__init__(f"the HSM did not honour {attribute} on a new key object: it was destroyed")
        self.attribute = attribute


def check_object(obj: Any, template: Mapping[Attribute, Any], length: int | None = None) -> None:
    """Raise TemplateNotHonoured (after destroying ``obj``) unless ``obj`` carries every checked
    attribute of ``template`` and, when ``length`` is given, ``CKA_VALUE_LEN == length`` bytes."""
    wrong = _first_difference(obj, template, length)
    if wrong is None:
        return
    with contextlib.suppress(p11.PKCS11Error):
        obj.destroy()
    log.error("the HSM did not honour %s on a new key object; the object was destroyed", wrong)
    raise TemplateNotHonoured(wrong)


def tighten(obj: Any) -> None:
    """Make ``obj`` sensitive and non-extractable when the token left it otherwise (a token may ignore
    these in an unwrap template; PKCS#11 lets both change in this direction only). A refusal leaves
    the object as it is, for :func:`check_object` to refuse."""
    for attribute, wanted in ((Attribute.SENSITIVE, True), (Attribute.EXTRACTABLE, False)):
        if _read(obj, attribute) != wanted:
            with contextlib.suppress(p11.PKCS11Error):
                obj[attribute] = wanted


def _first_difference(obj: Any, template: Mapping[Attribute, Any], length: int | None) -> str | None:
    for attribute in CHECKED:
        if attribute in template and _read(obj, attribute) != template[attribute]:
            return f"CKA_{attribute.name}"
    if length is not None and _read(obj, Attribute.VALUE_LEN) != length:
        return "CKA_VALUE_LEN"
    return None


def _read(obj: Any, attribute: Attribute) -> Any:
    try:
        return obj[attribute]
    except (p11.AttributeTypeInvalid, p11.AttributeSensitive):
        return None  # not readable: as good as not honoured
