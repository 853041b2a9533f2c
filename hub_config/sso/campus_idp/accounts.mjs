// The people who can sign in, their passwords and the claims the provider releases about them.

import { createHash, timingSafeEqual } from 'node:crypto';

// The claims each scope releases; oidc-provider turns every key into a supported scope.
export const CLAIMS_BY_SCOPE = {
  openid: ['sub'],
  profile: ['name', 'preferred_username'],
  email: ['email', 'email_verified'],
  groups: ['groups'],
};

function digest(text) {
  return createHash('sha256').update(text, 'utf8').digest();
}

// Compared for an unknown user name too, so the answer takes as long either way.
const NO_SUCH_PASSWORD = digest('\u0000no such user\u0000');

export class CampusDirectory {
  #users;

  /** `users`: the checked list from loadConfig. */
  constructor(users) {
    this.#users = new Map(users.map((user) => [user.username, user]));
  }

  /** The user whose name and password match, or undefined; never says which one did not. */
  authenticate(username, password) {
    const user = this.#users.get(username);
    const expected = user ? digest(user.password) : NO_SUCH_PASSWORD;
    const matches = timingSafeEqual(expected, digest(password));
    return user && matches ? user : undefined;
  }

  /** oidc-provider's findAccount: the account behind a `sub`, which is the user name. */
  findAccount = async (_ctx, sub) => {
    const user = this.#users.get(sub);
    if (!user) {
      return undefined;
    }
    return {
      accountId: user.username,
      async claims() {
        // oidc-provider filters these by the scopes and claims granted to the client.
        return {
          sub: user.username,
          preferred_username: user.username,
          name: user.name,
          email: user.email,
          email_verified: user.email_verified,
          groups: [...user.groups],
        };
      },
    };
  };
}
