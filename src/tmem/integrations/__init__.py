"""tmem inside agent frameworks (docs/integrations.md): one module per framework, each an extra.

* :mod:`tmem.integrations.langgraph` (``tmem[langgraph]``): a LangGraph ``BaseStore`` and pre/post model hooks;
* :mod:`tmem.integrations.openai_agents` (``tmem[openai-agents]``): an Agents SDK session, function tools and
  dynamic instructions;
* :mod:`tmem.integrations.pydantic_ai` (``tmem[pydantic-ai]``): a toolset, a history processor and a dynamic system
  prompt carried by the agent's dependencies.

All three are thin wrappers of :mod:`tmem.integrations.core` (recall, remember, forget, lookup over an in-process
:class:`tmem.Memory` / :class:`tmem.AsyncMemory` or a :mod:`tmem.client` of ``tmem serve``). This package imports no
framework: each module checks its extra first (:func:`tmem.util.extras.require_extra`).
"""
