"""Which OS account a hub user's processes run as, on one machine: the one mapping.

Design notes: docs/design/core.md, "gpuspawner.core.accounts".
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
from dataclasses import dataclass


class NoSuchAccount(LookupError):
    """The hub user has no system account on this machine."""

    def __init__(self, username: str):
        self.username = username
        super().__init__(
            f"There is no system account {username!r} on this machine, so nothing can run "
            f"as {username}. Ask the hub admins to create it (or to let the hub create "
            "accounts on first login: c.LocalAuthenticator.create_system_users = True)."
        )


@dataclass(frozen=True)
class UserAccount:
    """A system account: who a user's server and jobs run as."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    """Every group the account belongs to, its primary group included."""
    home: str
    shell: str

    @classmethod
    def for_hub_user(cls, username: str) -> UserAccount:
        """The account a hub user's processes run as: the system account of that name."""
        try:
            entry = pwd.getpwnam(username)
        except KeyError:
            raise NoSuchAccount(username) from None
        return cls(
            name=entry.pw_name,
            uid=entry.pw_uid,
            gid=entry.pw_gid,
            groups=tuple(os.getgrouplist(entry.pw_name, entry.pw_gid)),
            home=entry.pw_dir,
            shell=entry.pw_shell or "/bin/sh",
        )

    @classmethod
    def current(cls) -> UserAccount:
        """The account this process runs as."""
        entry = pwd.getpwuid(os.geteuid())
        return cls(
            name=entry.pw_name,
            uid=entry.pw_uid,
            gid=entry.pw_gid,
            groups=tuple(os.getgroups()),
            home=entry.pw_dir,
            shell=entry.pw_shell or "/bin/sh",
        )

    @property
    def is_current(self) -> bool:
        return self.uid == os.geteuid()

    def environment(self) -> dict[str, str]:
        """The login variables of the account (``HOME``, ``USER``, ``LOGNAME``, ``SHELL``)."""
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name, "SHELL": self.shell}

    def become(self) -> None:
        """Drop to this account for good, as a login does: groups, then group, then user,
        and the usual umask (022) for the files it writes (in a child process).

        Called between fork and exec; after it the process cannot regain root.
        """
        os.setgroups(list(self.groups))
        os.setresgid(self.gid, self.gid, self.gid)
        os.setresuid(self.uid, self.uid, self.uid)
        os.umask(0o022)

    def group_name(self) -> str:
        try:
            return grp.getgrgid(self.gid).gr_name
        except KeyError:
            return str(self.gid)


def ensure_account(name: str, *, service: bool = False) -> UserAccount:
    """The system account ``name``, created first if it does not exist (needs root).

    A person's account gets a home only they can open (0700) and a group of its own; a
    service account (``service=True``) gets neither a home nor a login shell.
    """
    try:
        return UserAccount.for_hub_user(name)
    except NoSuchAccount:
        pass
    command = ["useradd", "--user-group"]
    if service:
        command += ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin"]
    else:
        command += ["--create-home", "--shell", "/bin/bash"]
    done = subprocess.run([*command, name], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"The system account {name!r} could not be created ({done.stderr.strip()}); "
            "create it by hand or run the hub as root."
        )
    account = UserAccount.for_hub_user(name)
    if not service:
        os.chmod(account.home, 0o700)
    return account
