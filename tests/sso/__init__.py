"""Campus single sign-on: the stand-in OpenID Connect provider and the hub's login through it."""
