"""The provider client actor: adapts model provider APIs. Placeholder until its issue lands: it serves control messages only."""

from roboswe.actors import Actor, actor_main, refuse_unhandled
from roboswe.protocol.control import CONTROL_CODEC


async def main(actor: Actor) -> None:
    await actor.serve(CONTROL_CODEC, refuse_unhandled(actor.name))


if __name__ == "__main__":
    actor_main("provider_client", main)
