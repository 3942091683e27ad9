// The one form of every counter table (`*.def`: drop_reasons.def, tcp_counters.def,
// proxy_counters.def, hbone_counters.def, gateway_counters.def). Each row is
//
//   MG_COUNTER(Enumerator, "metric_name", "what it counts")
//
// and every table is expanded the same way, by defining MG_COUNTER as one of the expanders
// below around an #include of the .def: the enum, the names (the metric names and --stats-json
// keys) and the help texts, three parallel arrays in enum order (VPP *_error.def):
//
//   enum class Counter : uint16_t {
//   #define MG_COUNTER MG_COUNTER_ENUMERATOR
//   #include "dataplane/hbone/hbone_counters.def"
//   #undef MG_COUNTER
//     kCount
//   };
//   inline constexpr const char* kCounterNames[] = {
//   #define MG_COUNTER MG_COUNTER_NAME
//   ...
//
// Any thread.
#pragma once

#define MG_COUNTER_ENUMERATOR(e, name, help) e,
#define MG_COUNTER_NAME(e, name, help) name,
#define MG_COUNTER_HELP(e, name, help) help,
